"""Running the suite on a machine over SSH: who to reach (target, targets),
how (connection, hostkeys), getting the workloads there (sync), and making sure
the machine can run them (envcheck, packages). The launcher that uses these is
gpubench.launch.ssh; nothing here imports torch."""
