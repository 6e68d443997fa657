"""Maintainers' scripts (peers, GPU export and runner, A/B benches), run from the repository root as
`python -m tools.<name>`; they import the installed tfdqn and each other as `tools.<name>`."""
