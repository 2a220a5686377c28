"""What the series takes as given: the data sheets of the GPUs it names (bandwidth, peak compute, the T4's and the
H200's make-up) and Qwen3-0.6B's exact architecture with the tiny stand-in CPU mode runs. Data only."""

# Nominal memory bandwidth in GB/s (vendor datasheets), for the weight-read floor.
NOMINAL_GB_S = {"t4": 320, "l4": 300, "a10": 600, "a10g": 600, "v100": 900, "p100": 732, "a100": 1555,
                "l40s": 864, "h100": 3350, "gh200": 4000, "h200": 4800}


# Nominal peak compute (TFLOP/s, dense) per GPU: fp16 on the tensor cores, and fp32 FMA without them (the
# roof of a kernel whose matmul compiles to FMA, as Triton's tl.dot does on a T4). From NVIDIA's data sheets.
NOMINAL_TFLOPS = {"t4": (65, 8.1), "l4": (121, 30.3), "a10": (125, 31.2), "a10g": (125, 31.2), "v100": (125, 15.7),
                  "a100": (312, 19.5), "l40s": (362, 91.6), "h100": (989, 67), "gh200": (989, 67), "h200": (989, 67)}


# Data-sheet figures of the two GPUs the series compares: the reader's T4 and the H200 of the committed run.
# The H200's L2 is what the H200 itself reports (torch.cuda.get_device_properties: 60 MiB); its memory is
# the data sheet's 141, which the data sheet calls GB (the device reports about 140 GiB: that "GB" is binary).
# Per streaming multiprocessor (SM): registers and the most shared memory one SM can hold; then the whole GPU.
GPU_SPECS = {
    "t4": {"name": "Tesla T4", "compute capability": "7.5", "SMs": 40, "warps per SM (most resident)": 32,
           "registers per SM (KiB)": 256, "shared memory per SM (KiB)": 64, "L2 (MiB)": 4, "memory (GiB)": 15,
           "memory": "GDDR6"},
    "h200": {"name": "NVIDIA H200", "compute capability": "9.0", "SMs": 132, "warps per SM (most resident)": 64,
             "registers per SM (KiB)": 256, "shared memory per SM (KiB)": 228, "L2 (MiB)": 60, "memory (GiB)": 141,
             "memory": "HBM3e"},
}


# Qwen3-0.6B's exact architecture (its config.json on the hub), and the tiny CPU stand-in.
QWEN3_0_6B = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                  tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
                  bos_token_id=151643, eos_token_id=151645)


TINY_QWEN3 = dict(QWEN3_0_6B, vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                  bos_token_id=None, eos_token_id=None)
