"""How a configuration generates, greedily: transformers' eager ``generate()``, our ``GraphDecoder`` (a static KV cache
and one CUDA-graph replay per decoded token), ``OwnCacheDecoder`` (the same graph over our own KV cache and decode
step), or transformers' compiled path (``decoder_for``)."""
from __future__ import annotations

from slower_harness import env  # first: it settles TRITON_INTERPRET before Triton loads

import time

import torch
from transformers import GenerationConfig, StaticCache

import slower_kernels
from slower_harness.clocks import no_gc, sync


def generate(model, ids: torch.Tensor, new_tokens: int, use_cache: bool = True,
              cache_implementation: str | None = None):
    """Greedy, exactly ``new_tokens`` new tokens; returns (new ids, seconds). ``cache_implementation="static"``
    is transformers' own fast path: it compiles the decode step (torch.compile with CUDA graphs; the first
    call compiles, tens of seconds)."""
    config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              use_cache=use_cache, cache_implementation=cache_implementation,
                              pad_token_id=model.config.eos_token_id or 0)
    with no_gc():
        sync()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
        sync()
        seconds = time.perf_counter() - start
    new = out[0, ids.shape[1]:]
    if new.numel() != new_tokens:
        raise RuntimeError(f"asked for {new_tokens} new tokens, generate() returned {new.numel()}")
    return new, seconds


# our own decode step, one stage per decoder name (``slower_kernels.decoder.STAGES``); "own" is the last stage
OWN_DECODERS = {"own-cache": "cache", "own-write": "write", "own-fold": "fold", "own": "tune"}
DECODERS = ("generate", "graph", "compiled", *OWN_DECODERS)  # how a configuration generates (compare_configs' ``decoder``)


def check_decoder(decoder: str, use_cache: bool = True) -> None:
    """``decoder`` is one of DECODERS and can run here, with ``use_cache``."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
    if decoder != "generate" and not use_cache:
        raise ValueError(f"decoder={decoder!r} decodes with a static KV cache: use_cache=False does not apply")
    if decoder == "compiled" and not env.HAS_GPU:
        raise ValueError("decoder='compiled' compiles transformers' decode step with CUDA graphs: it needs a GPU")


def decoder_for(model, ids: torch.Tensor, new_tokens: int, decoder: str = "generate", use_cache: bool = True):
    """A function ``run(n) -> (new ids, seconds)`` generating greedily with ``decoder`` (``DECODERS``):
    "generate" (transformers' eager ``generate()``, what every chapter times), "graph" (``GraphDecoder``:
    a static cache and one CUDA-graph replay per decoded token; eager in CPU mode), "own" (``OwnCacheDecoder``:
    the fast model's layers over our own KV cache, one CUDA-graph replay per token; it brings its own kernels, so
    it takes the original model, unpatched; "own-cache", "own-write" and "own-fold" are its earlier stages,
    ``OWN_DECODERS``) or "compiled" (transformers' ``generate(cache_implementation="static")``,
    compiled; GPU only). ``new_tokens``: the most ``run`` will be asked for. Build it inside the ``patched`` block
    it runs in: a captured graph holds the weights it was captured with."""
    check_decoder(decoder, use_cache)
    max_len = ids.shape[1] + max(new_tokens, 4)  # capture writes 3 steps past the prompt
    if decoder == "graph":
        graph = GraphDecoder(model, max_len)
        return lambda n: graph.generate(ids, n)
    if decoder in OWN_DECODERS:
        own = OwnCacheDecoder(model, max_len, stage=OWN_DECODERS[decoder])
        return lambda n: own.generate(ids, n)
    if decoder == "compiled":
        return lambda n: generate(model, ids, n, cache_implementation="static")
    return lambda n: generate(model, ids, n, use_cache)


# --- A decode step without the host: a static KV cache and one CUDA graph per step -------------
class GraphDecoder:
    """Greedy generation with a static KV cache, one whole decode step replayed from a CUDA graph.

    Eager ``generate()`` launches every kernel of a decode step from Python, ~1,650 of them per token for
    Qwen3-0.6B; here the step is captured once (``torch.cuda.graph``) and each token costs one graph
    launch. The step is self-contained on the GPU: it reads the current token and position from static
    tensors, writes the next token into the output buffer at its index, and advances both, so no value
    goes back to the host until the end. The prefill runs eagerly (its length varies).

    transformers' ``StaticCache`` keeps its own write position per layer (``cumulative_length``, a GPU
    tensor advanced by every ``update``), so warm-up and capture advance it too: ``generate`` resets the
    cache before each generation. ``max_len`` bounds prompt + new tokens (past it the cache's
    ``index_copy_`` fails on the GPU). Without a GPU the same step runs eagerly (``graphed`` is False):
    the tokens are the same, the speed is not the point there.
    """

    def __init__(self, model, max_len: int, use_graph: bool | None = None):
        if not isinstance(max_len, int) or max_len < 2:
            raise ValueError(f"max_len must be an int >= 2 (prompt + new tokens), got {max_len!r}")
        self.model, self.max_len = model, max_len
        self.graphed = env.HAS_GPU if use_graph is None else bool(use_graph)
        if self.graphed and not env.HAS_GPU:
            raise ValueError("use_graph=True needs a CUDA GPU; CPU mode runs the decode step eagerly")
        self.graph = None
        self._build()

    def _build(self) -> None:
        """The state the step reads and writes: the static cache, the token, its position, the output."""
        device = next(self.model.parameters()).device
        self.cache = StaticCache(config=self.model.config, max_cache_len=self.max_len)
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)     # the token the step reads
        self.position = torch.zeros(1, 1, dtype=torch.long, device=device)  # its position in the sequence
        self.out = torch.zeros(self.max_len, dtype=torch.long, device=device)  # every generated token, by position

    def _step(self) -> None:
        """One decode step, entirely on the device: forward, argmax, store, advance."""
        logits = self.model(input_ids=self.token, position_ids=self.position, past_key_values=self.cache,
                            use_cache=True).logits
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
        self.position.add_(1)
        self.out.index_copy_(0, self.position[0], nxt[0])
        self.token.copy_(nxt)

    def _prefill(self, ids: torch.Tensor) -> None:
        """Reset the cache, run the prompt eagerly, and leave its next token and position in place."""
        self.cache.reset()
        p = ids.shape[1]
        logits = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True).logits
        self.token.copy_(logits[:, -1].argmax(dim=-1, keepdim=True))
        self.position.fill_(p)
        self.out.zero_()
        self.out[p] = self.token[0, 0]

    def _capture(self, ids: torch.Tensor) -> None:
        """Warm up on a side stream (as torch.cuda.graphs asks), then capture one step."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    @torch.inference_mode()
    def generate(self, ids: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, float]:
        """Greedy: exactly ``new_tokens`` new ids (1-D, on the CPU) and the wall seconds it took (prefill
        included, capture excluded: the first call captures the step before its timed part)."""
        if ids.dim() != 2 or ids.shape[0] != 1:
            raise ValueError(f"ids must be [1, prompt_len] (batch size 1), got shape {tuple(ids.shape)}")
        p = ids.shape[1]
        if new_tokens < 1 or p + new_tokens > self.max_len:
            raise ValueError(f"new_tokens must be in [1, max_len - prompt_len] = [1, {self.max_len - p}], "
                             f"got {new_tokens}")
        if self.graphed and self.graph is None:
            self._prefill(ids)
            self._capture(ids)
        with no_gc():
            sync()
            start = time.perf_counter()
            self._prefill(ids)
            for _ in range(new_tokens - 1):
                if self.graphed:
                    self.graph.replay()
                else:
                    self._step()
            new = self.out[p:p + new_tokens].to("cpu", copy=True)  # read back; a copy: .cpu() aliases on a CPU
            seconds = time.perf_counter() - start
        return new, seconds


class OwnCacheDecoder(GraphDecoder):
    """``GraphDecoder``'s greedy generation (one decode step captured in a CUDA graph, replayed per token; eager
    without a GPU) over ``slower_kernels.OwnCacheModel``: the fast layers, our own KV cache and a decode step of
    our own instead of transformers' ``StaticCache`` and model forward. It reads the model's weights as they are
    when it is built and does not modify the model. ``stage``: ``OwnCacheModel``'s (``slower_kernels.decoder.STAGES``),
    the last by default."""

    def __init__(self, model, max_len: int, use_graph: bool | None = None, stage: str = "tune"):
        self.stage = stage
        super().__init__(model, max_len, use_graph)

    def _build(self) -> None:
        self.own = slower_kernels.OwnCacheModel(self.model, self.max_len, self.stage)  # its cache, position, output
        self.out = self.own.out

    def _step(self) -> None:
        self.own.step()

    def _prefill(self, ids: torch.Tensor) -> None:
        self.own.prefill(ids)
