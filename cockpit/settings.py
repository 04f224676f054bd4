"""Names the DAGs and the local Airflow share: pools, queues and connection ids, each read once from the
environment. Imports nothing from Airflow, so that `citeflow.cockpit.local_airflow` (which drives Airflow through
its command line), `citeflow.cockpit.orchestration` (which builds the DAGs) and `citeflow.cockpit.run_settings` (their
runs'
settings) use the same definitions.
"""

from __future__ import annotations

import os

# Encoder training and embedding: one slot, so two runs never share a GPU.
GPU_POOL = os.environ.get("CITEFLOW_GPU_POOL", "gpu")
GPU_QUEUE = os.environ.get("CITEFLOW_GPU_QUEUE", "default")
# embed_graph and its embed_graph_rank tasks: all ranks of a distributed PBG run must run at once, so the
# pool needs at least embed_graph.machines slots.
PBG_POOL = os.environ.get("CITEFLOW_PBG_POOL", "pbg")
PBG_QUEUE = os.environ.get("CITEFLOW_PBG_QUEUE", "default")
PBG_RANK_QUEUE = os.environ.get("CITEFLOW_PBG_RANK_QUEUE", PBG_QUEUE)
SPARK_CONN_ID = os.environ.get("CITEFLOW_SPARK_CONN_ID", "spark_default")
PBG_CONN_ID = os.environ.get("CITEFLOW_PBG_CONN_ID", "pbg_rendezvous")
# The Airflow Variable listing the folders a DAG run may read inputs from (comma-separated); unset: the demo's.
INPUT_ROOTS_VARIABLE = os.environ.get("CITEFLOW_INPUT_ROOTS_VARIABLE", "citeflow_input_roots")

# Retries of every task of citeflow's DAGs: a task that ends for a reason a retry can mend (its worker died, the
# holder of a lease it waited for vanished, a filesystem hiccup) runs again; stages are idempotent and resume
# (a killed training from its last checkpoint). A user's mistake fails at once, without retries.
TASK_RETRIES = int(os.environ.get("CITEFLOW_TASK_RETRIES", "2"))
TASK_RETRY_DELAY_S = float(os.environ.get("CITEFLOW_TASK_RETRY_DELAY_S", "30"))

# (name, slots, description) of each pool, as `airflow pools set` takes them.
POOLS = (
    (GPU_POOL, "1", "citeflow encoder training"),
    (PBG_POOL, "4", "citeflow PBG ranks (slots >= embed_graph.machines)"),
)
