"""The paper encoder: loading a model folder, its sentence-transformers files, and embedding rows of papers."""
