module kvexact.example/kvexact

go 1.19
