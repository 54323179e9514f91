module github.com/kvexact/kvexact/go

go 1.19
