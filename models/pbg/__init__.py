"""PyTorch-BigGraph graph embeddings: the citations converted to PBG's input, its training in a process of its own or
distributed, warm starts, and the fixes torchbiggraph 1.0.0 needs."""
