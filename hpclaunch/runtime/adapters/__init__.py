"""Thin adapters from the runtime API to training frameworks.

Each module imports its framework when it is imported itself, never at
``import hpclaunch.runtime``: ``torch`` (plain PyTorch), ``hf`` (transformers' Trainer),
``lightning`` (Lightning 2.x, or ``pytorch_lightning``).
"""
