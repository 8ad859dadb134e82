"""view-contiguous: .view() on a tensor whose memory layout cannot be viewed that way."""
