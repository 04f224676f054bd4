"""Triplet mining: SciNCL's kNN windows over graph embeddings (FAISS), SPECTER's citation triplets, and the neighbour
ranks of a strategy's picks."""
