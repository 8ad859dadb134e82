from transformers import AutoModel
model = AutoModel.from_pretrained('bert-base-uncased', torch_dtype='float32')  # FIX: torch-dtype-fp16
