"""backward-twice: a backward() reached a part of the graph an earlier backward() already freed."""
