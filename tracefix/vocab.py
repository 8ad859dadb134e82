"""Shared PyTorch vocabulary: one home for the names several stages and families recognise.

Names as written in user code (methods, classes, ``torch.`` functions), not autograd node names
(those are :mod:`tracefix.locator.ops`).  Data only.
"""

# torch.optim (and common third-party) optimizer classes: what `Cls(model.parameters())` builds
OPTIMIZER_CLASSES = frozenset({
    "SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "Rprop", "ASGD", "NAdam", "RAdam",
    "SparseAdam", "LBFGS", "Adafactor", "Muon"})

# Tensor methods returning a view of (or the same memory as) their receiver
VIEW_METHODS = frozenset({
    "view", "view_as", "reshape", "narrow", "select", "transpose", "t", "permute", "expand", "expand_as",
    "unsqueeze", "squeeze", "unflatten", "flatten", "unfold", "diagonal", "chunk", "split", "unbind", "movedim",
    "moveaxis", "swapaxes", "swapdims", "as_strided", "detach", "view_as_real", "tensor_split", "hsplit", "vsplit"})
# ... and attributes that do
VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})

# torch.<name>(...) that makes a new tensor from sizes or data
TENSOR_FACTORIES = frozenset({
    "empty", "zeros", "ones", "full", "rand", "randn", "randint", "tensor", "as_tensor", "from_numpy", "arange",
    "linspace", "eye", "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"})

# methods spelled like in-place ones (a trailing `_`) that write no tensor's values
NOT_INPLACE_METHODS = frozenset({
    "requires_grad_", "share_memory_", "retain_grad_", "record_stream_", "pin_memory_"})

# ... those of them that reorder, repeat or skip strides: a later .view() of the result may fail
STRIDE_METHODS = frozenset({
    "transpose", "permute", "t", "expand", "expand_as", "narrow", "swapaxes", "swapdims", "movedim", "moveaxis",
    "unfold", "as_strided", "diagonal"})

# functions a framework's training loop calls for the loss it then backpropagates (Lightning's
# LightningModule.training_step, the Hugging Face Trainer.compute_loss) and the helpers they share
LOSS_FN_NAMES = frozenset({
    "training_step", "compute_loss", "train_step", "_compute_loss", "compute_losses",
    "shared_step", "_shared_step", "_common_step", "common_step", "step_loss"})
# ... and the hooks a framework runs with gradients off (Lightning's evaluation loops, the Trainer's)
NO_GRAD_HOOKS = frozenset({"validation_step", "test_step", "predict_step", "prediction_step"})
# module base classes that know their own device as ``self.device`` (the framework moves them there)
DEVICE_AWARE_MODULES = frozenset({"LightningModule"})
