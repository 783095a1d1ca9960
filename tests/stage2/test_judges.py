"""Judges: the chat judge against a local HTTP server, the oracle, reward margins and reply parsing."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fedpref.stage2.judges import (
    PAPER_JUDGE_TEMPLATE,
    ChatJudge,
    MarginJudge,
    OracleJudge,
    focused_template,
    parse_choice,
)
from fedpref.stage2.task import count_words, oracle_scores


class _Handler(BaseHTTPRequestHandler):
    """Answers like a chat API: 'A' when RESPONSE A mentions 'big', 'B' when B does, else prose."""

    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        text = body["messages"][0]["content"]
        a = text.split("### RESPONSE A:")[1].split("### RESPONSE B:")[0]
        b = text.split("### RESPONSE B:")[1].split("### YOUR CHOICE:")[0]
        answer = "A" if "big" in a else "B." if "big" in b else "I cannot decide."
        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.seen = []
    httpd = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_chat_judge_against_local_server(server, monkeypatch):
    monkeypatch.setenv("FEDPREF_TEST_KEY", "secret")
    judge = ChatJudge(server, model="gpt-4o-mini", api_key_env="FEDPREF_TEST_KEY")
    verdicts = judge(["p1", "p2", "p3"], ["a big dog", "a dog", "a cat"], ["a dog", "a big cat", "a bird"], "G1")
    assert verdicts == [1.0, 0.0, 0.5]  # the third reply names neither letter: a tie
    assert judge.unparsed == 1
    first = _Handler.seen[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer secret"
    assert first["body"]["model"] == "gpt-4o-mini"
    expected = PAPER_JUDGE_TEMPLATE.format(prompt="p1", response_a="a big dog", response_b="a dog")
    assert first["body"]["messages"] == [{"role": "user", "content": expected}]
    assert "Pick the response that is more helpful and harmless." in expected


def test_a_type_with_its_own_template_is_asked_its_own_question(server):
    harmless = focused_template("harmless")
    assert "Pick the response that is more harmless. State your choice" in harmless
    assert harmless.replace("more harmless.", "more helpful and harmless.") == PAPER_JUDGE_TEMPLATE
    judge = ChatJudge(server, api_key_env="", templates={"harmless": harmless})
    judge(["p"], ["a big dog"], ["a dog"], "harmless")
    judge(["p"], ["a big dog"], ["a dog"], "helpful")  # no template of its own: the paper's question
    asked = [x["body"]["messages"][0]["content"] for x in _Handler.seen]
    assert asked == [
        harmless.format(prompt="p", response_a="a big dog", response_b="a dog"),
        PAPER_JUDGE_TEMPLATE.format(prompt="p", response_a="a big dog", response_b="a dog"),
    ]


def test_chat_judge_unreachable_endpoint_is_a_clear_error():
    judge = ChatJudge("http://127.0.0.1:9/v1", api_key_env="", timeout_s=2, retries=0)
    with pytest.raises(ConnectionError, match="judge endpoint"):
        judge(["p"], ["a"], ["b"], "G1")


def test_parse_choice():
    assert parse_choice("A") == "A"
    assert parse_choice(" B.") == "B"
    assert parse_choice("Response A is better") == "A"
    assert parse_choice("Both are bad") is None
    assert parse_choice("") is None


def test_oracle_counts_size_words_exactly():
    assert count_words("A big, BIG dog and a huge cat. Bigger is not counted.") == 3
    judge = OracleJudge(oracle_scores())
    first, second = ["a big dog", "a dog", "a big dog"], ["a dog", "a huge big dog", "a tall cat"]
    assert judge(["p"] * 3, first, second, "G1") == [1.0, 0.0, 0.5]
    assert judge(["p"] * 3, first, second, "G2") == [0.0, 1.0, 0.5]


def test_margin_judge():
    judge = MarginJudge(lambda prompts, a, b, key: [len(x) - len(y) for x, y in zip(a, b)])
    assert judge(["p"] * 3, ["long", "s", "ab"], ["s", "long", "cd"], "any") == [1.0, 0.0, 0.5]
