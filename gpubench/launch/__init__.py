"""How a run is launched: one small interface, one module per way of launching
(torchrun on this machine, torchrun over SSH, later Slurm and multi-node)."""
