"""cuda-on-cpu: code that asks for CUDA on a machine or torch build without it."""
