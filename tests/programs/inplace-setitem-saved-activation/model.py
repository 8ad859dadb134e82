"""Graph Attention Network: GraphAttentionLayer and the two-layer GAT.

Follows pytorch/examples gat/main.py's GAT LAYER DEFINITION and MAIN GAT NETWORK MODULE sections.
"""
import torch
import torch.nn.functional as F
from torch import nn


class GraphAttentionLayer(nn.Module):
    """Graph Attention Layer (Velickovic et al., "Graph Attention Networks").

        e_ij = LeakyReLU(a^T [W h_i || W h_j]),  alpha_ij = softmax_j(e_ij),  h_i' = sum_j alpha_ij W h_j
    """

    def __init__(self, in_features, out_features, n_heads, concat=False, dropout=0.4, leaky_relu_slope=0.2):
        super().__init__()
        self.n_heads = n_heads
        self.concat = concat
        self.dropout = dropout
        if concat:  # concatenating the attention heads
            self.out_features = out_features
            assert out_features % n_heads == 0
            self.n_hidden = out_features // n_heads
        else:  # averaging the heads (used in the paper's output layer)
            self.n_hidden = out_features
        self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
        self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
        self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_normal_(self.W)
        nn.init.xavier_normal_(self.a)

    def _get_attention_scores(self, h_transformed):
        """e_ij for all node pairs at once: (n_heads, n_nodes, n_nodes)."""
        source_scores = torch.matmul(h_transformed, self.a[:, :self.n_hidden, :])
        target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden:, :])
        e = source_scores + target_scores.mT
        return self.leakyrelu(e)

    def forward(self, h, adj_mat):
        n_nodes = h.shape[0]
        h_transformed = torch.mm(h, self.W)
        h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
        # (n_heads, n_nodes, n_hidden)
        h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)

        e = self._get_attention_scores(h_transformed)
        # mask the scores of non-existent edges
        connectivity_mask = -9e16 * torch.ones_like(e)
        e = torch.where(adj_mat > 0, e, connectivity_mask)

        attention = F.softmax(e, dim=-1)
        # non-edges must get exactly zero weight, not just a tiny one
        attention[:, adj_mat == 0] = 0.0
        attention = F.dropout(attention, self.dropout, training=self.training)

        h_prime = torch.matmul(attention, h_transformed)
        if self.concat:
            h_prime = h_prime.permute(1, 0, 2).contiguous().view(n_nodes, self.out_features)
        else:
            h_prime = h_prime.mean(dim=0)
        return h_prime


class GAT(nn.Module):
    """Two Graph Attention Layers: multi-head + ELU, then a single-head output layer + log-softmax."""

    def __init__(self, in_features, n_hidden, n_heads, num_classes, concat=False, dropout=0.4,
                 leaky_relu_slope=0.2):
        super().__init__()
        self.gat1 = GraphAttentionLayer(in_features=in_features, out_features=n_hidden, n_heads=n_heads,
                                        concat=concat, dropout=dropout, leaky_relu_slope=leaky_relu_slope)
        self.gat2 = GraphAttentionLayer(in_features=n_hidden, out_features=num_classes, n_heads=1,
                                        concat=False, dropout=dropout, leaky_relu_slope=leaky_relu_slope)

    def forward(self, input_tensor, adj_mat):
        x = self.gat1(input_tensor, adj_mat)
        x = F.elu(x)
        x = self.gat2(x, adj_mat)
        return F.log_softmax(x, dim=1)
