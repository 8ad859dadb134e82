"""Physics residuals for the damped-oscillator PINN."""
import torch


def ode_residual(model, t, omega=2.0, zeta=0.1):
    """Residual of u'' + 2*zeta*omega*u' + omega^2*u = 0 at collocation points t."""
    t = t.requires_grad_(True)
    u = model(t)
    # first and second derivatives of the network output w.r.t. time
    du_dt, = torch.autograd.grad(u, t, create_graph=True)
    d2u_dt2, = torch.autograd.grad(du_dt, t, grad_outputs=torch.ones_like(du_dt), create_graph=True)
    return d2u_dt2 + 2 * zeta * omega * du_dt + omega ** 2 * u


def initial_condition_loss(model, u0=1.0):
    t0 = torch.zeros(1, 1)
    return (model(t0) - u0).pow(2).mean()
