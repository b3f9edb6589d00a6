nice --adj 5 rm x; timeout --sig KILL 5 rm y; stdbuf --out L rm z; xargs --max-a f rm; env --split 'rm a' ; env -S'-i A=1 rm' b
