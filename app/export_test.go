package app

// PageETag is pageETag, for the external tests.
var PageETag = pageETag

// StableParts is stableParts, for the external tests.
var StableParts = stableParts
