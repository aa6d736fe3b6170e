"""What-if transforms: a trace rewritten before a policy replays it (issue 25), e.g. research moved into a
delegated child, or tool round-trips brokered as one program. ``base`` holds the interface and registry;
one module per transform."""
