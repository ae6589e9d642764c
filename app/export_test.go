package app

// PageETag is pageETag, for the external tests.
var PageETag = pageETag
