"""Launch: how a run gets onto a machine and runs there.

base      the contract the sweep talks to (Launcher: machine, prepare, run, close),
          SweepPoint, Machine and how it gives out nodes (NodeSpan), RunOutcome
factory   the one reader of --on (read_on -> Target) and open_launcher
schemes   launchers named by a scheme (--on slurm) and the flags each declares
points    the one reader of counts and the one builder of sweep points
local     torchrun on this machine          ssh      torchrun over SSH
cluster   torchrun c10d across a rented cluster's members (cluster_torchrun: the
          command, rendezvous, timeouts, NCCL/gloo settings)
slurm/    one sbatch job per point
failures  a failed run explained, and whether it will repeat at every point
process, cpu_policy, gpu_sampling   the child process, CPU threads, GPU sampling
"""
