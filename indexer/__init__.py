"""Indexer: manual loaders, chunks, Chroma + BM25 index, retriever."""
