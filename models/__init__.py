"""Graph-embedding and encoder models: PyTorch-BigGraph glue today, the Transformer encoder later."""
