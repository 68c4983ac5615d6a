"""Generic analyses of a stored run, one module each, registered in `registry` (their interface:
`base.Analysis`): prompt factors, temperature curve, logit lens, activation patching, steering.
The one view of a stored run they and the reports read is `view.StoredRun`."""
