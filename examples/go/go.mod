module github.com/kvexact/kvexact/examples/go

go 1.19

require github.com/kvexact/kvexact/go v0.0.0-00010101000000-000000000000

replace github.com/kvexact/kvexact/go => ../../go
