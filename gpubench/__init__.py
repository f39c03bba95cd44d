"""gpubench: benchmark PyTorch DDP workloads across GPU counts and cloud providers."""

__version__ = "0.1.0"
