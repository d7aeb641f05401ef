package inspect

// GlobMatch exposes globMatch to the external tests.
var GlobMatch = globMatch
