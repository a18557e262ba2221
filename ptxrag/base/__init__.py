"""The base layer every part may import: where data lives (paths). It imports nothing else of ptxrag."""
