"""Actors that step envs outside the learner's process: actor processes on this machine, or Ray actors
on this machine or a cluster, behind the loop's collector seam (`collector.RemoteCollector`)."""
