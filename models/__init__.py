"""Models: PyTorch-BigGraph glue (import, training, link prediction), FAISS mining, the Transformer encoder
and its trainer."""
