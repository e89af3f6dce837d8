"""Speed and memory comparisons of attnlib against PyTorch and Hugging Face, printed as ratios.

Run ``python -m benchmarks --quick`` (a few minutes on 2 CPU cores) or ``--full``.
"""
