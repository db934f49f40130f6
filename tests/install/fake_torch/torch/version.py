"""torch.version of the stand-in (tests/install/fake_torch)."""
cuda = "0.0-fake"
