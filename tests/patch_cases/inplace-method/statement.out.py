def forward(self, x):
    x = self.conv(x)
    x = x.relu()  # FIX: inplace-method
    return x
