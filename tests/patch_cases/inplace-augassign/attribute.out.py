class M:
    def forward(self, x):
        self.state = self.state - x * 2  # FIX: inplace-augassign
        return self.state
