import torch


class TransformerNet(torch.nn.Module):
    """The image transformation network: down-sampling convolutions, residual blocks, up-sampling
    convolutions, instance norm throughout (channel widths made small for the CPU)."""

    def __init__(self, width=8, blocks=2):
        super(TransformerNet, self).__init__()
        # Initial convolution layers
        self.conv1 = ConvLayer(3, width, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(width, affine=True)
        self.conv2 = ConvLayer(width, width * 2, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(width * 2, affine=True)
        self.conv3 = ConvLayer(width * 2, width * 4, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(width * 4, affine=True)
        # Residual layers
        self.res = torch.nn.Sequential(*[ResidualBlock(width * 4) for _ in range(blocks)])
        # Upsampling Layers
        self.deconv1 = UpsampleConvLayer(width * 4, width * 2, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(width * 2, affine=True)
        self.deconv2 = UpsampleConvLayer(width * 2, width, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(width, affine=True)
        self.deconv3 = ConvLayer(width, 3, kernel_size=9, stride=1)
        # Non-linearities
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        y = self.deconv3(y)
        return y


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super(ConvLayer, self).__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        out = self.reflection_pad(x)
        out = self.conv2d(out)
        return out


class ResidualBlock(torch.nn.Module):
    """ResidualBlock (He et al., https://arxiv.org/abs/1512.03385), as in the torch.ch blog post."""

    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        out = out + residual
        return out


class UpsampleConvLayer(torch.nn.Module):
    """Upsamples the input and then does a convolution (fewer checkerboard artifacts than
    ConvTranspose2d)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super(UpsampleConvLayer, self).__init__()
        self.upsample = upsample
        if upsample:
            self.upsample_layer = torch.nn.Upsample(mode='nearest', scale_factor=upsample)
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = self.upsample_layer(x_in)
        out = self.reflection_pad(x_in)
        out = self.conv2d(out)
        return out
