"""How a run is launched: one contract (base.Launcher: machine, prepare, run,
close), one module per way of launching (torchrun on this machine, torchrun over
SSH; later Slurm and a cluster of rented machines), and one factory
(factory.open_launcher) that picks the launcher an --on value means."""
