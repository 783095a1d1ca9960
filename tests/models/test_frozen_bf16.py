"""bf16 products with frozen weights: rounding written out by hand, bucketed row counts that do not show."""

import torch

from fedpref.models.frozen_bf16 import bucket_rows, frozen_bf16_matmul


def test_bucket_rows_by_hand():
    assert [bucket_rows(n) for n in (1, 16, 17, 100, 1024, 1025, 1300)] == [16, 16, 32, 112, 1024, 1088, 1344]
    assert len({bucket_rows(n) for n in range(1025, 2049)}) == 16  # 16 sizes per doubling: kernels get reused
    assert all(0 <= bucket_rows(n) - n < max(16, n / 16) for n in range(1, 5000))


def test_frozen_bf16_matmul_by_hand():
    # 1/3 is 0.333984375 in bf16 (8 significant bits); 1 + 0.333984375 rounds to 1.3359375 (steps of 2^-7) and
    # 1 - 0.333984375 = 0.666015625 to 0.6640625 (steps of 2^-8, a tie to the even 170/256)
    x = torch.tensor([[1.0, 1 / 3]], requires_grad=True)
    weight = torch.tensor([[1.0, 1.0], [1.0, -1.0]]).to(torch.bfloat16)
    out = frozen_bf16_matmul(x, weight)
    assert out.dtype == torch.float32 and out.tolist() == [[1.3359375, 0.6640625]]
    out.backward(torch.tensor([[1 / 3, 1.0]]))  # grad @ W, rounded the same way
    assert x.grad.tolist() == [[1.3359375, -0.6640625]]


def test_frozen_bf16_matmul_is_the_bf16_product_for_any_row_count():
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(5, 8, generator=gen).to(torch.bfloat16)
    for rows in (1, 37, 300):  # bucketed to 16, 48, 304 rows: the zero rows added must not show
        x = torch.randn(rows, 8, generator=gen, requires_grad=True)
        grad = torch.randn(rows, 5, generator=gen)
        out = frozen_bf16_matmul(x, weight)
        out.backward(grad)
        bf = torch.bfloat16
        assert out.shape == (rows, 5) and torch.equal(out, out.to(bf).float())  # rounded to bf16
        exact = x.detach().to(bf).float() @ weight.float().T
        assert torch.allclose(out, exact, rtol=2**-8, atol=1e-6)
        assert torch.allclose(x.grad, grad.to(bf).float() @ weight.float(), rtol=2**-8, atol=1e-6)
