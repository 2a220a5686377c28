"""slower_harness.model: loading the model (a local checkpoint, the hub, or seeded random weights) and its prompts."""
import pytest
import torch

from slower_harness import env, model, specs

from .conftest import MODEL_TOL, logits


def test_load_model_from_a_local_checkpoint_uses_from_pretrained(tiny, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    tiny.save_pretrained(tmp_path)
    calls = []
    real = AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    loaded_model, tokenizer, desc = model.load_model(str(tmp_path))
    assert calls == [str(tmp_path)] and "local checkpoint" in desc and tokenizer is None
    loaded, saved = loaded_model.state_dict(), tiny.state_dict()
    assert loaded.keys() == saved.keys() and all(torch.equal(loaded[k], saved[k]) for k in saved)
    ids = model.make_prompt(5, vocab_size=tiny.config.vocab_size)  # kernels may differ in the last bit
    torch.testing.assert_close(logits(loaded_model, ids), logits(tiny, ids), **MODEL_TOL[env.DTYPE])


def test_load_model_falls_back_when_the_hub_is_unreachable(monkeypatch, capsys):
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(env, "MODE", "full")  # as on a GPU without network
    monkeypatch.setattr(model, "_hub_reachable", lambda *a, **k: False)
    monkeypatch.setattr(model, "QWEN3_0_6B", specs.TINY_QWEN3)  # keep the test small
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: pytest.fail("from_pretrained called without a hub"))
    _, tokenizer, desc = model.load_model("Qwen/Qwen3-0.6B")
    assert tokenizer is None and "random weights" in desc and "hub unreachable" in desc
    assert "meaningless" in capsys.readouterr().out


def test_hub_probe_respects_offline_mode(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model._hub_reachable() is False
