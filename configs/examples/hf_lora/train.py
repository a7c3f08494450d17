"""A Hugging Face Trainer + PEFT LoRA job with drop-in gpuorch checkpointing
(gpuorch.integrations.hf), on a tiny randomly initialised causal LM built from a config: no
weights are downloaded (set HF_HUB_OFFLINE=1; nothing here reaches a model hub).

A 2-layer Llama (vocab 256) gets LoRA adapters on its attention projections and learns a fixed
synthetic next-token task. On the notice signal the Trainer saves at the next step and trains
on; a relaunch resumes from the newest complete checkpoint with ``resume_from_checkpoint``
(model, adapters, optimizer, scheduler, RNG states, data position), and ends with the loss of an
uninterrupted run (bitwise on CPU with one thread; see docs/workloads.md for the tolerance).

Environment (all optional): STEPS (60), CKPT_EVERY (20), STEP_SLEEP (0), SEED (0), LR (0.01).
"""

from __future__ import annotations

import json
import os
import time

from gpuorch.integrations.protocol import NoticeFlag, checkpoint_dir

notice = NoticeFlag().install()  # before the heavy imports: a notice may come while they load

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from gpuorch.integrations.hf import GpuorchCallback, resume_checkpoint  # noqa: E402

SEQ, N_SEQS, VOCAB = 32, 256, 256


class Tokens(torch.utils.data.Dataset):
    """Fixed sequences with a learnable rule (each token is the previous one plus a stride)."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(1234)
        start = torch.randint(0, VOCAB, (N_SEQS, 1), generator=g)
        stride = torch.randint(1, 4, (N_SEQS, 1), generator=g)
        self.ids = (start + stride * torch.arange(SEQ)) % VOCAB

    def __len__(self) -> int:
        return N_SEQS

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Slow(TrainerCallback):
    """STEP_SLEEP seconds per step: time to deliver a notice mid-run in demos and tests."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(self.seconds)
        return control


def main() -> None:
    torch.set_num_threads(1)
    seed = int(os.environ.get("SEED", "0"))
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ)
    model = get_peft_model(LlamaForCausalLM(config),
                           LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"]))
    args = TrainingArguments(
        output_dir=str(checkpoint_dir()), max_steps=int(os.environ.get("STEPS", "60")),
        per_device_train_batch_size=16, learning_rate=float(os.environ.get("LR", "1e-2")),
        save_steps=int(os.environ.get("CKPT_EVERY", "20")), save_total_limit=2, logging_steps=10,
        seed=seed, data_seed=seed, use_cpu=True, report_to=[], disable_tqdm=True, dataloader_num_workers=0,
    )
    callback = GpuorchCallback(install_handler=False)
    callback.notice = notice
    callbacks: list[TrainerCallback] = [callback]
    if float(os.environ.get("STEP_SLEEP", "0")):
        callbacks.append(Slow(float(os.environ["STEP_SLEEP"])))
    data = Tokens()
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)
    resume = resume_checkpoint()
    print(f"resuming from {os.path.basename(resume)}" if resume else "starting fresh", flush=True)
    trainer.train(resume_from_checkpoint=resume)

    model.eval()
    with torch.no_grad():
        batch = data.ids[:64]
        final = float(model(input_ids=batch, labels=batch).loss)
    if trainer.is_world_process_zero():
        print(f"done at step {trainer.state.global_step}: final loss {final!r}", flush=True)
        result = os.environ.get("GPUORCH_RESULT_FILE")
        if result:
            with open(result, "w") as f:
                json.dump({"final_loss": final, "steps": trainer.state.global_step}, f)


if __name__ == "__main__":
    main()
