"""Parameters changed between a training loop's forward pass and its backward (module-level loops)."""
from test_locator import LEAF, TORCH_BACKWARD, first, line_of, run, user_frame, write


def test_no_grad_clamp_block_inside_the_training_loop_is_the_fix_site(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        critic = Critic()
        opt = torch.optim.RMSprop(critic.parameters())
        for step in range(5):
            real = sample(128)
            loss = critic(real).mean()
            with torch.no_grad():
                for p in critic.parameters():
                    p.clamp_(-0.01, 0.01)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """)
    out = run(tmp_path, "inplace", [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"),
                                    *TORCH_BACKWARD], LEAF)
    assert first(out)[:2] == ("train.py", line_of(tmp_path, "train.py", "with torch.no_grad"))


def test_ema_weights_swapped_in_through_a_helper_and_a_context_manager(tmp_path):
    write(tmp_path, "ema.py", """
        import contextlib
        import torch
        class EMA:
            def __init__(self, parameters):
                self.params = list(parameters)
                self.shadow = [p.detach().clone() for p in self.params]

            @contextlib.contextmanager
            def swapped(self):
                with torch.no_grad():
                    for p, s in zip(self.params, self.shadow):
                        p.copy_(s)
                yield
        """)
    write(tmp_path, "train.py", """
        import torch
        from ema import EMA
        ema = EMA(model.parameters())

        def evaluate(model, ema):
            with ema.swapped():
                return model(vx).sum().item()

        for step in range(5):
            loss = model(x).sum()
            val = evaluate(model, ema)
            loss.backward()
        """)
    out = run(tmp_path, "inplace", [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"),
                                    *TORCH_BACKWARD], LEAF)
    assert first(out)[:2] == ("train.py", line_of(tmp_path, "train.py", "val = evaluate"))


def test_a_list_of_plain_tensors_is_not_parameters(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        bufs = [torch.zeros(3) for _ in range(2)]
        for step in range(5):
            loss = model(x).sum()
            with torch.no_grad():
                for b in zip(bufs, bufs):
                    b[0].add_(1)
            loss.backward()
        """)
    out = run(tmp_path, "inplace", [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"),
                                    *TORCH_BACKWARD], LEAF)
    assert all(s.line != line_of(tmp_path, "train.py", "with torch.no_grad") for s in out.fix_sites)
