def forward(self, x):
    h = self.fc(x).relu()
    h += self.skip(x)  # FIX: inplace-augassign
    return h
