"""Triplet-loss training of the encoder: the entry point (one CPU, one GPU or torchrun), the step plan, one optimizer
step, losses, token batches, prefetch, checkpoints and warm starts."""
