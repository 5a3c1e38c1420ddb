"""A bug that lives between DeepSpeed and Lightning, on releases that build beside torch 2.13 (issue #51).

A training script takes DeepSpeed's tensor-parallel path where DeepSpeed has one (``deepspeed.tp_model_init``,
new in DeepSpeed 0.16.4 of the releases this grid holds: not in 0.16.0) and, because a model initialised so
carries frozen copies, asks Lightning's ``DeepSpeedStrategy`` to leave frozen parameters out of its checkpoints
(``exclude_frozen_parameters``, new in Lightning 2.5.5 of them: not in 2.5.2). So it fails — Lightning's own
constructor refuses the keyword — where deepspeed >= 0.16.4 and lightning < 2.5.5; each package alone is fine.

Checked by hand in the releases' sources: ``def tp_model_init`` in deepspeed/__init__.py of 0.16.4, 0.16.9 and
0.17.0, not of 0.16.0; ``exclude_frozen_parameters: bool`` in lightning/fabric/strategies/deepspeed.py of 2.5.5
and 2.6.0, not of 2.5.0 or 2.5.2.
"""

import deepspeed
from lightning.fabric.strategies import DeepSpeedStrategy

options = {}
if hasattr(deepspeed, "tp_model_init"):
    options["exclude_frozen_parameters"] = True
strategy = DeepSpeedStrategy(**options)
print(f"DeepSpeedStrategy({options}) made with deepspeed {deepspeed.__version__}")
