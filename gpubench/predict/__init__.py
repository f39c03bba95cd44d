"""Know before you pay: predicted throughput, time and cost of a workload on a GPU
type, at N GPUs on K nodes, for every live offer.

Roofline thinking, not machine learning. The inputs, each carried with its source:
the workload's FLOPs and gradient bytes per sample (workload_profiles), the GPU
type's datasheet and published figures (gpu_specs), the links between the GPUs
(links), and, before all of them, measured records (basis). model.py does the
arithmetic; advise.py ranks offers. Nothing here keeps state of its own: the next
prediction reads the records the last run wrote.
"""
