"""Stage 2 of FedVPA-GP (paper 001, Sec. 4.4, Algorithm 1 lines 15-23): conditional DPO, FedDPO, win rates."""
