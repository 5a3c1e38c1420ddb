"""DeepSpeed #5603: "cannot import name '_get_socket_with_port' from 'torch.distributed.elastic.agent.server.api'".

The report: `ds_report` (and so any `import deepspeed`) fails as DeepSpeed is imported, on a torch 2.4 build:
DeepSpeed's elastic agent imported torch's private `_get_socket_with_port`, which torch removed (pytorch#125743,
first in torch 2.4.0) in favour of `get_free_port`. DeepSpeed 0.14.4 imports `get_free_port` instead (#5654).
An interaction: it fails only where the DeepSpeed release is older than 0.14.4 and torch is 2.4.0 or newer.

This is the report's own command, `ds_report`, as its console script runs it: the import line, then the report
(on this machine DeepSpeed's CPU accelerator, DS_ACCELERATOR=cpu). Exits 0 when DeepSpeed imports and reports.
"""

import os

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # no GPU here: DeepSpeed's CPU accelerator, as the harness runs it

from deepspeed.env_report import cli_main  # the first line of the `ds_report` console script

cli_main()
print("PASS: deepspeed imported and ds_report ran", flush=True)
