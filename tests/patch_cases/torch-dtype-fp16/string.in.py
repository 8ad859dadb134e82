from transformers import AutoModel
model = AutoModel.from_pretrained('bert-base-uncased', torch_dtype='float16')  # FIX: torch-dtype-fp16
