"""Training with DeepSpeed, one engine for every stage and variant.

    runtime.py     distributed variables for a lone process; bf16 support check
    ds_config.py   infra/deepspeed/*.json + batch/clipping/precision from params
    engine.py      deepspeed.initialize with a client torch AdamW + linear decay
    data_order.py  seeded, resumable step batches (same data at the same step)
    checkpoint.py  atomic DeepSpeed checkpoints, weights-only loading, final HF save
    meters.py      loss terms, tokens/s, codebook usage window
    loop.py        Trainer: fit (resumes), validation, logging, save_pretrained
    job.py         a stage run end to end: MLflow run, outputs, metrics, curves
    mentions.py    stage two: the mention generator's collator and model
"""
