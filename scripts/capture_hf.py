"""Capture real transformers output: the checkpoint loading bar and Trainer logs (train, eval, save).

Run with a venv holding transformers (4.x or 5.x), accelerate and torch==2.13.0:
    /work/capture-venvs/hf4/bin/python scripts/capture_hf.py
    /work/capture-venvs/hf5/bin/python scripts/capture_hf.py
Writes tests/data/logs/transformers-<version>-loading.log and transformers-<version>-trainer.log.
"""

from __future__ import annotations

import sys
import tempfile

from capture_common import run_to_log, version_of


def tiny_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)


def child_save(path: str) -> None:
    import torch
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_config()).save_pretrained(path, max_shard_size="40KB")


def child_load(path: str) -> None:
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(path)
    print("loaded", sum(p.numel() for p in model.parameters()), "parameters")


def child_train(out_dir: str) -> None:
    import torch
    from transformers import LlamaForCausalLM, Trainer, TrainingArguments
    torch.manual_seed(0)

    class Tiny(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            ids = torch.randint(0, 128, (16,))
            return {"input_ids": ids, "labels": ids.clone()}

    args = TrainingArguments(output_dir=out_dir, max_steps=8, logging_steps=1, eval_strategy="steps",
                             eval_steps=4, save_steps=4, per_device_train_batch_size=2,
                             per_device_eval_batch_size=2, report_to=[], use_cpu=True,
                             disable_tqdm=False, save_total_limit=1)
    trainer = Trainer(model=LlamaForCausalLM(tiny_config()), args=args, train_dataset=Tiny(),
                      eval_dataset=Tiny())
    trainer.train()


def child_train_info(out_dir: str) -> None:
    # Scripts often raise transformers' verbosity; that adds the banner, eval and checkpoint lines.
    import transformers
    transformers.logging.set_verbosity_info()
    child_train(out_dir)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        {"save": child_save, "load": child_load, "train": child_train, "train_info": child_train_info}[sys.argv[2]](sys.argv[3])
        return
    version = version_of("transformers")
    with tempfile.TemporaryDirectory() as tmp:
        run_to_log([sys.executable, __file__, "--child", "save", tmp + "/m"], f"transformers-{version}-save.log",
                   keep_empty=False)
        run_to_log([sys.executable, __file__, "--child", "load", tmp + "/m"], f"transformers-{version}-loading.log")
        run_to_log([sys.executable, __file__, "--child", "train", tmp + "/out"], f"transformers-{version}-trainer.log")
        run_to_log([sys.executable, __file__, "--child", "train_info", tmp + "/out2"],
                   f"transformers-{version}-trainer-info.log")


if __name__ == "__main__":
    main()
